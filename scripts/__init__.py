"""Build and release helpers (`make package`)."""
