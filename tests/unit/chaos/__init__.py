"""Unit tests of the fault-campaign history checker (tests/chaos/)."""
