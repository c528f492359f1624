"""zipsgd from Python: fit and score the estimators, quantize, save and load a packed data set.

Run with ``python docs/examples/python_api.py [FOLDER]`` (FOLDER: where to save the .zsgd
file; default a temporary folder).  A test runs it.
"""

import sys
import tempfile
from pathlib import Path

from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.model_selection import train_test_split

import zipsgd

# Least squares on 6-bit double-sampled data, trained by the bit-exact engine model.
X, y = load_diabetes(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
model = zipsgd.ZipSGDRegressor(backend="golden", bits=6, epochs=20).fit(X_train, y_train)
print(f"diabetes R^2 {model.score(X_test, y_test):.3f}, step size {model.step_size_:.3g}, "
      f"{model.engine_report_['bytes_streamed']} bytes streamed")

# LS-SVM: labels mapped to -1/+1 and back.
X, y = load_breast_cancer(return_X_y=True)
clf = zipsgd.ZipSGDClassifier(bits=4, epochs=10).fit(X, y)
print(f"breast_cancer accuracy {clf.score(X, y):.3f}, classes {clf.classes_.tolist()}")

# Pack once, save, load: the file `zipsgd train FILE.zsgd` and the board read.
packed = zipsgd.quantize(X, y, bits=4, encoding="double", bus_width=64, epochs=2)
folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
path = packed.save(folder / "breast_cancer.zsgd")
info = zipsgd.load(path).info()
print(f"{path.name}: {info['n_samples']} samples x {info['n_features']} features, "
      f"{info['bits_per_value']:.2f} bits per value")
