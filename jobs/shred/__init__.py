"""The shred job: enriched events to atomic-events TSV, shredded-types JSON lines, or wide rows."""
