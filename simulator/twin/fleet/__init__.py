"""Replicas behind a router: routing policies, what a router sees, the HTTP fleet service."""
