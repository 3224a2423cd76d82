"""Snowplow enriched events: the 131-field TSV layout and its parser."""
