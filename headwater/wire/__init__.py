"""The Kafka wire layer: framing, headers, kio codecs, dispatch and the asyncio server."""
