"""The web console (`headwater console`, `headwater serve --console-listen`): server-rendered
pages about a Kafka-compatible cluster, built on the admin commands' code (headwater/admin/)
and speaking only the Kafka protocol to the brokers, so it works against Apache Kafka too.
See docs/console.md."""
