"""Many runs: one point runner, one fan-out, and the profiles that choose the next point
(sweeps, sizing searches, calibration and fit points).
"""
