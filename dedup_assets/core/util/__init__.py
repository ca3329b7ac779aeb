"""What every stage uses: the base of the errors a user can fix (``errors.py``), commands a
message gives (``shell.py``), batch streams (``streams.py``) and the kernels' cache folder
(``kernel_cache.py``)."""
