"""The response canvas: how an answer is laid out as anchors and masked spans, which schema it is laid out from, and
the character grammars that constrain each span."""
