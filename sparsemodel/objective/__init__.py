"""What f is: data operators, affine maps, loss terms, the composite design and its recognition,
the evaluator and the oracle."""
