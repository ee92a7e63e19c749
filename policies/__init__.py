"""isofabric policy engine: pure verification, rendering and parsing of fabric isolation."""
