"""Audit replay: prove a result folder by re-executing its recorded actions."""
