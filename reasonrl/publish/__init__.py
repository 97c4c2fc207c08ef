"""Publishing a trained model: consolidated Hugging Face export (`export`), its model card (`card`) and
the Hub upload (`hub`). `reasonrl export` and the end of training (`hub.push`) use them.
"""
