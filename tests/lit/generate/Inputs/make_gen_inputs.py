"""Writes the inputs of generate/bad-input.test into the directory argv[1]."""
import os
import sys

import numpy as np

d = sys.argv[1]
save = lambda name, a: np.save(os.path.join(d, name), np.array(a, dtype=np.int64))
save("src.npy", [[5, 6, 7, 0], [8, 9, 0, 0]])
save("emptysrc.npy", [[5, 6, 7, 0], [0, 0, 0, 0]])
save("prompt.npy", [[5, 6, 7], [8, 0, 0]])
save("emptyprompt.npy", [[5, 6, 7], [0, 0, 0]])
