"""Shared evaluation: weighted kNN, linear probe, cross-validated classifiers, feature extraction."""
from suite.eval.cv import cv_accuracy, svm_cv_accuracy
from suite.eval.features import extract_features
from suite.eval.knn import knn_accuracy, knn_predict
from suite.eval.linear import linear_probe

__all__ = ["cv_accuracy", "svm_cv_accuracy", "extract_features", "knn_accuracy", "knn_predict", "linear_probe"]
