"""The trained-brain tests need the brains extra (scikit-learn, numpy): installed by the test extra."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # the synthetic task module beside the tests
