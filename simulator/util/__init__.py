"""Small helpers every layer may use: token estimates, redaction, visible labels."""
