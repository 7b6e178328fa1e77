"""JSON in and out: private machinery under :mod:`tether.tools`, :mod:`tether.state` and the values.

* ``strictjson.py``: strict parsing (duplicate keys, NaN, depth, size), canonical
  JSON, hashes and MACs, and the typed field checkers every ``from_dict`` uses;
* ``docstrings.py``: a parameter's description from a Google, NumPy or Sphinx docstring;
* ``signature.py``: a function's parameters as a pydantic model, and its JSON Schema;
* ``check.py``: the subset of JSON Schema that :meth:`tether.Tool.from_schema` checks;
* ``notes.py``: what a model reads when its arguments do not fit a schema.
"""
