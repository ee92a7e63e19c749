"""isofabric system of record: persistence, allocation and use cases."""
