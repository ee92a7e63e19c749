"""isofabric REST API and command line."""
