"""Shared pytest set-up: every test starts and ends with an empty dynamo cache and seeded RNGs."""

import random

import pytest
import torch

import dynamo


@pytest.fixture(autouse=True)
def fresh_dynamo_state():
    """Reset dynamo's caches and counters around each test, and seed torch and random."""
    dynamo.reset()
    torch.manual_seed(0)
    random.seed(0)
    yield
    dynamo.reset()
