"""The conformance suite users run: one LIBERO case per selected catalog entry."""
