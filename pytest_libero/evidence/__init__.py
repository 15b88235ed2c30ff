"""The case folder: lossless observation streams, action chunks, the video, and reading them back."""
