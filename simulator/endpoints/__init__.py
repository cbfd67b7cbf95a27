"""Endpoints: the seam between the driver and whatever serves the model."""
