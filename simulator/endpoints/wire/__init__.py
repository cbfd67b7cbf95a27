"""Wire protocols (dialects): request shapes and streamed-event parsing."""
