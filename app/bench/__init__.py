"""Every benchmark behind `llamadesk bench`: they print figures compared within one run.

Speed targets live here rather than in timed tests, because absolute rates on
a shared machine swing from minute to minute; ratios measured in one run do not.
"""
