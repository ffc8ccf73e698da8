"""FX/ATen graphs into the nn dialect: importer, op table, Dynamo backend, fallback."""
