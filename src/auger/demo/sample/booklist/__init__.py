"""A tiny reading-list library (the sample project of `auger demo`)."""
