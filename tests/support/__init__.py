"""Helpers the tests share: servers and processes to drive, checkers of what they answer, fakes and data.

``tests/`` is on ``sys.path`` (pytest puts the directory of the root ``conftest.py`` there), so tests
import these as ``support.<module>``.
"""
