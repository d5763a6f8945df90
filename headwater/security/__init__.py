"""Listeners and authentication: Kafka's listener model (`listeners.py`), TLS from PEM
files (`tls.py`), SASL PLAIN and SCRAM-SHA-256/512 (`sasl.py`, `scram.py`)."""
