"""Winnow's infrastructure: typed env config (config.py), one construct per AWS concern (components/), stacks."""
