"""The performance model: the roofline, its profiles (YAML) and the fit of its efficiency terms."""
