"""Live views: one module per view, pyqtgraph for 2D plots."""
