"""dynamo: PyTorch 2 compiler stack in Rust."""
