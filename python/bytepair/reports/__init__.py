"""Reports on tokenizers, as plain data for the CLI and the web page.

- ``stats``   the vocabulary (lengths, kinds, scripts) and corpora (bytes/token,
              tokens/word, vocabulary used, the frequency-rank curve)
- ``compare`` several tokenizers on the same texts, per corpus or per language
- ``audit``   candidates for under-trained tokens ("SolidGoldMagikarp")
- ``plots``   the Zipf curve and tokens per language, with matplotlib

Each returns a dataclass; ``to_dict()`` gives what ``--json`` prints.
"""

from bytepair.reports.audit import Audit, Candidate, audit
from bytepair.reports.compare import Comparison, compare
from bytepair.reports.stats import Stats, stats

__all__ = ["Audit", "Candidate", "Comparison", "Stats", "audit", "compare", "stats"]
