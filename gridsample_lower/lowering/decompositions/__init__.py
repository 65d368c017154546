"""One decomposition per mode; ``registry`` lists them."""
