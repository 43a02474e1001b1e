"""The built-in datasets, one module per family, each registered as a plugin registers one
(``fedweb_engine.components.builtins`` imports them): bundled (digits), generated (images, synthetic,
tokens) or read from files you have (cifar10, emnist, npz)."""
