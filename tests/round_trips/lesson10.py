from . import WrongAnswer

WRONG = WrongAnswer(
    "10_speedrun", "verdict",
    "def verdict(before_s, after_s, alpha=0.05):\n"
    "    test = stats.ttest_ind(before_s, after_s, equal_var=False)\n"
    "    return 'faster' if test.pvalue < alpha else 'not shown'\n",
    "a two-sided test (or abs()) says the times differ")
