"""The bottom layer: Messages-API content types that every package may import."""
