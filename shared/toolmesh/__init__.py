"""The core every toolmesh service imports: contracts, config, errors, bus, store."""
