"""Client quotas (KIP-13, KIP-55, KIP-219): entities and their records (`entities.py`),
the sampled rates and throttle times (`throttle.py`), and the broker's use of them
(`enforce.py`). The quotas themselves are ClientQuotaRecords in the metadata image."""
