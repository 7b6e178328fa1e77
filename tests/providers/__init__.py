"""Tests of the HTTP model providers, and the fake provider server other tests import."""
