"""The bootstrap's settings, one source for `gamut report`, the Space and every interval they show.

Kept apart from :mod:`.statistics` (which re-exports them) so that the command line can show
them in ``--help`` without loading numpy, pandas and scipy.
"""

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0
