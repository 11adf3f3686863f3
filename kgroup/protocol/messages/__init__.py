"""One module per Kafka API, each declaring its request and response for all versions."""
