"""One run, end to end: its spec, the server's facts, the manifest, the drive (in this
process or sharded), the finish and signals.
"""
