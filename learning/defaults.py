"""The failure model's default parameters that `portfolio retrain --help` shows, in a module that imports nothing,
so that building the CLI's parser costs no numpy or scipy import (`learning.changes` and `learning.counts` use
them and re-export them)."""

DEFAULT_CHANGE_ODDS = 20.0  # prior odds against a change of failure rate (`learning.changes`)
DEFAULT_STALE_HALF_LIFE = 2.0  # a kin group's usual gaps between visits (`learning.counts`)
