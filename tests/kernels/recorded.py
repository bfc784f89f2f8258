"""iopub messages as real kernels sent them (ipykernel 7 / IPython 8, Deno 2.x), recorded
once with tests/kernels/kernel_cells.py: the unit tests of outputs feed these shapes."""

# fmt: off
# `%pip install "unterminated`: the cell's frame, the prelude's, then shlex's own
IPYTHON_ERROR_IN_PRELUDE = {'ename': 'ValueError',
 'evalue': 'No closing quotation',
 'traceback': ['\x1b[0;31m---------------------------------------------------------------------------\x1b[0m',
               '\x1b[0;31mValueError\x1b[0m                                Traceback (most recent '
               'call last)',
               'Cell \x1b[0;32mIn[2], line 1\x1b[0m\n'
               '\x1b[0;32m----> 1\x1b[0m '
               "\x1b[43m_tether_pip\x1b[49m\x1b[43m(\x1b[49m\x1b[38;5;124;43m'\x1b[39;49m\x1b[38;5;124;43minstall "
               '\x1b[39;49m\x1b[38;5;124;43m"\x1b[39;49m\x1b[38;5;124;43munterminated\x1b[39;49m\x1b[38;5;124;43m\'\x1b[39;49m\x1b[43m)\x1b[49m\n',
               'File \x1b[0;32m<tether-prelude>:308\x1b[0m, in '
               '\x1b[0;36m_tether_pip\x1b[0;34m(args)\x1b[0m\n',
               'File \x1b[0;32m~/.pyenv/versions/3.11.7/lib/python3.11/shlex.py:315\x1b[0m, in '
               '\x1b[0;36msplit\x1b[0;34m(s, comments, posix)\x1b[0m\n'
               '\x1b[1;32m    313\x1b[0m \x1b[38;5;28;01mif\x1b[39;00m '
               '\x1b[38;5;129;01mnot\x1b[39;00m comments:\n'
               '\x1b[1;32m    314\x1b[0m     lex\x1b[38;5;241m.\x1b[39mcommenters '
               "\x1b[38;5;241m=\x1b[39m \x1b[38;5;124m'\x1b[39m\x1b[38;5;124m'\x1b[39m\n"
               '\x1b[0;32m--> 315\x1b[0m \x1b[38;5;28;01mreturn\x1b[39;00m '
               '\x1b[38;5;28;43mlist\x1b[39;49m\x1b[43m(\x1b[49m\x1b[43mlex\x1b[49m\x1b[43m)\x1b[49m\n',
               'File \x1b[0;32m~/.pyenv/versions/3.11.7/lib/python3.11/shlex.py:300\x1b[0m, in '
               '\x1b[0;36mshlex.__next__\x1b[0;34m(self)\x1b[0m\n'
               '\x1b[1;32m    299\x1b[0m \x1b[38;5;28;01mdef\x1b[39;00m\x1b[38;5;250m '
               '\x1b[39m\x1b[38;5;21m__next__\x1b[39m(\x1b[38;5;28mself\x1b[39m):\n'
               '\x1b[0;32m--> 300\x1b[0m     token \x1b[38;5;241m=\x1b[39m '
               '\x1b[38;5;28;43mself\x1b[39;49m\x1b[38;5;241;43m.\x1b[39;49m\x1b[43mget_token\x1b[49m\x1b[43m(\x1b[49m\x1b[43m)\x1b[49m\n'
               '\x1b[1;32m    301\x1b[0m     \x1b[38;5;28;01mif\x1b[39;00m token '
               '\x1b[38;5;241m==\x1b[39m \x1b[38;5;28mself\x1b[39m\x1b[38;5;241m.\x1b[39meof:\n'
               '\x1b[1;32m    302\x1b[0m         \x1b[38;5;28;01mraise\x1b[39;00m '
               '\x1b[38;5;167;01mStopIteration\x1b[39;00m\n',
               'File \x1b[0;32m~/.pyenv/versions/3.11.7/lib/python3.11/shlex.py:109\x1b[0m, in '
               '\x1b[0;36mshlex.get_token\x1b[0;34m(self)\x1b[0m\n'
               '\x1b[1;32m    107\x1b[0m     \x1b[38;5;28;01mreturn\x1b[39;00m tok\n'
               '\x1b[1;32m    108\x1b[0m \x1b[38;5;66;03m# No pushback.  Get a token.\x1b[39;00m\n'
               '\x1b[0;32m--> 109\x1b[0m raw \x1b[38;5;241m=\x1b[39m '
               '\x1b[38;5;28;43mself\x1b[39;49m\x1b[38;5;241;43m.\x1b[39;49m\x1b[43mread_token\x1b[49m\x1b[43m(\x1b[49m\x1b[43m)\x1b[49m\n'
               '\x1b[1;32m    110\x1b[0m \x1b[38;5;66;03m# Handle inclusions\x1b[39;00m\n'
               '\x1b[1;32m    111\x1b[0m \x1b[38;5;28;01mif\x1b[39;00m '
               '\x1b[38;5;28mself\x1b[39m\x1b[38;5;241m.\x1b[39msource '
               '\x1b[38;5;129;01mis\x1b[39;00m \x1b[38;5;129;01mnot\x1b[39;00m '
               '\x1b[38;5;28;01mNone\x1b[39;00m:\n',
               'File \x1b[0;32m~/.pyenv/versions/3.11.7/lib/python3.11/shlex.py:191\x1b[0m, in '
               '\x1b[0;36mshlex.read_token\x1b[0;34m(self)\x1b[0m\n'
               '\x1b[1;32m    189\x1b[0m         '
               '\x1b[38;5;28mprint\x1b[39m(\x1b[38;5;124m"\x1b[39m\x1b[38;5;124mshlex: I see EOF '
               'in quotes state\x1b[39m\x1b[38;5;124m"\x1b[39m)\n'
               '\x1b[1;32m    190\x1b[0m     \x1b[38;5;66;03m# XXX what error should be raised '
               'here?\x1b[39;00m\n'
               '\x1b[0;32m--> 191\x1b[0m     \x1b[38;5;28;01mraise\x1b[39;00m '
               '\x1b[38;5;167;01mValueError\x1b[39;00m(\x1b[38;5;124m"\x1b[39m\x1b[38;5;124mNo '
               'closing quotation\x1b[39m\x1b[38;5;124m"\x1b[39m)\n'
               '\x1b[1;32m    192\x1b[0m \x1b[38;5;28;01mif\x1b[39;00m nextchar '
               '\x1b[38;5;241m==\x1b[39m \x1b[38;5;28mself\x1b[39m\x1b[38;5;241m.\x1b[39mstate:\n'
               '\x1b[1;32m    193\x1b[0m     \x1b[38;5;28;01mif\x1b[39;00m '
               '\x1b[38;5;129;01mnot\x1b[39;00m '
               '\x1b[38;5;28mself\x1b[39m\x1b[38;5;241m.\x1b[39mposix:\n',
               '\x1b[0;31mValueError\x1b[0m: No closing quotation']}

# a `_repr_markdown_` that raises: IPython's formatter frame above the user's method
IPYTHON_ERROR_IN_FORMATTER = {'ename': 'RuntimeError',
 'evalue': 'no repr',
 'traceback': ['\x1b[0;31m---------------------------------------------------------------------------\x1b[0m',
               '\x1b[0;31mRuntimeError\x1b[0m                              Traceback (most recent '
               'call last)',
               'File '
               '\x1b[0;32m~/.pyenv/versions/3.11.7/lib/python3.11/site-packages/IPython/core/formatters.py:344\x1b[0m, '
               'in \x1b[0;36mBaseFormatter.__call__\x1b[0;34m(self, obj)\x1b[0m\n'
               '\x1b[1;32m    342\x1b[0m     method \x1b[38;5;241m=\x1b[39m get_real_method(obj, '
               '\x1b[38;5;28mself\x1b[39m\x1b[38;5;241m.\x1b[39mprint_method)\n'
               '\x1b[1;32m    343\x1b[0m     \x1b[38;5;28;01mif\x1b[39;00m method '
               '\x1b[38;5;129;01mis\x1b[39;00m \x1b[38;5;129;01mnot\x1b[39;00m '
               '\x1b[38;5;28;01mNone\x1b[39;00m:\n'
               '\x1b[0;32m--> 344\x1b[0m         \x1b[38;5;28;01mreturn\x1b[39;00m '
               '\x1b[43mmethod\x1b[49m\x1b[43m(\x1b[49m\x1b[43m)\x1b[49m\n'
               '\x1b[1;32m    345\x1b[0m     \x1b[38;5;28;01mreturn\x1b[39;00m '
               '\x1b[38;5;28;01mNone\x1b[39;00m\n'
               '\x1b[1;32m    346\x1b[0m \x1b[38;5;28;01melse\x1b[39;00m:\n',
               'Cell \x1b[0;32mIn[3], line 3\x1b[0m, in '
               '\x1b[0;36mBad._repr_markdown_\x1b[0;34m(self)\x1b[0m\n'
               '\x1b[1;32m      2\x1b[0m \x1b[38;5;28;01mdef\x1b[39;00m\x1b[38;5;250m '
               '\x1b[39m\x1b[38;5;21m_repr_markdown_\x1b[39m(\x1b[38;5;28mself\x1b[39m):\n'
               '\x1b[0;32m----> 3\x1b[0m     \x1b[38;5;28;01mraise\x1b[39;00m '
               '\x1b[38;5;167;01mRuntimeError\x1b[39;00m(\x1b[38;5;124m"\x1b[39m\x1b[38;5;124mno '
               'repr\x1b[39m\x1b[38;5;124m"\x1b[39m)\n',
               '\x1b[0;31mRuntimeError\x1b[0m: no repr']}

# f() calls g() raises KeyError: three frames of the user's cell
IPYTHON_ERROR_NESTED = {'ename': 'KeyError',
 'evalue': "'k'",
 'traceback': ['\x1b[0;31m---------------------------------------------------------------------------\x1b[0m',
               '\x1b[0;31mKeyError\x1b[0m                                  Traceback (most recent '
               'call last)',
               'Cell \x1b[0;32mIn[4], line 5\x1b[0m\n'
               '\x1b[1;32m      3\x1b[0m \x1b[38;5;28;01mdef\x1b[39;00m\x1b[38;5;250m '
               '\x1b[39m\x1b[38;5;21mg\x1b[39m():\n'
               '\x1b[1;32m      4\x1b[0m     \x1b[38;5;28;01mraise\x1b[39;00m '
               '\x1b[38;5;167;01mKeyError\x1b[39;00m(\x1b[38;5;124m"\x1b[39m\x1b[38;5;124mk\x1b[39m\x1b[38;5;124m"\x1b[39m)\n'
               '\x1b[0;32m----> 5\x1b[0m \x1b[43mf\x1b[49m\x1b[43m(\x1b[49m\x1b[43m)\x1b[49m\n',
               'Cell \x1b[0;32mIn[4], line 2\x1b[0m, in \x1b[0;36mf\x1b[0;34m()\x1b[0m\n'
               '\x1b[1;32m      1\x1b[0m \x1b[38;5;28;01mdef\x1b[39;00m\x1b[38;5;250m '
               '\x1b[39m\x1b[38;5;21mf\x1b[39m():\n'
               '\x1b[0;32m----> 2\x1b[0m     \x1b[43mg\x1b[49m\x1b[43m(\x1b[49m\x1b[43m)\x1b[49m\n',
               'Cell \x1b[0;32mIn[4], line 4\x1b[0m, in \x1b[0;36mg\x1b[0;34m()\x1b[0m\n'
               '\x1b[1;32m      3\x1b[0m \x1b[38;5;28;01mdef\x1b[39;00m\x1b[38;5;250m '
               '\x1b[39m\x1b[38;5;21mg\x1b[39m():\n'
               '\x1b[0;32m----> 4\x1b[0m     \x1b[38;5;28;01mraise\x1b[39;00m '
               '\x1b[38;5;167;01mKeyError\x1b[39;00m(\x1b[38;5;124m"\x1b[39m\x1b[38;5;124mk\x1b[39m\x1b[38;5;124m"\x1b[39m)\n',
               "\x1b[0;31mKeyError\x1b[0m: 'k'"]}

# Deno: the message first, one line per frame; a helper's frame names tether-prelude.js
DENO_ERROR_IN_PRELUDE = {
    "ename": "Error",
    "evalue": "inner",
    "traceback": [
        "Error: inner",
        "    at globalThis._t (tether-prelude.js, <anonymous>:1:35)",
        "    at Object.op (ext:core/01_core.js:12:3)",
        "    at g (<anonymous>:2:3)",
        "    at <anonymous>:4:1",
    ],
}

# Deno on `throw "str"`: no traceback worth the name
DENO_THROWN_STRING = {"ename": "Error", "evalue": "str", "traceback": [""]}

# Deno on a syntax error: no error message on iopub, only the execute_reply
DENO_SYNTAX_ERROR_REPLY = {
    "status": "error", "execution_count": 4, "ename": "Error", "evalue": "Execution failed",
    "traceback": [],
}

# an echoed number from Deno: coloured
DENO_ECHO = {"execution_count": 1, "data": {"text/plain": "\u001b[33m42\u001b[39m"}, "metadata": {}, "transient": {}}

# ipykernel's clear_output(wait=True)
CLEAR_WAIT = {"wait": True}
