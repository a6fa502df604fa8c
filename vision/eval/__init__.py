"""Vision evaluation: kNN + linear probe on frozen backbone features, embedding geometry."""
from vision.eval.classification import ClassificationEvaluator
from vision.eval.geometry import GeometryEvaluator

__all__ = ["ClassificationEvaluator", "GeometryEvaluator"]
