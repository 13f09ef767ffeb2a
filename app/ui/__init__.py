"""The desktop window: Qt widgets fed by one engine thread.

Everything under app/ui may import Qt; the few Qt-free modules here
(conversation, config, gauge_model) are kept free of it so they can be tested
without a display and reused by the store later.
"""
