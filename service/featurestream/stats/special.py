"""Special functions used by the tests of independence."""

from __future__ import annotations

from functools import lru_cache

from scipy import special as _sp


@lru_cache(maxsize=256)
def normal_quantile(p: float) -> float:
    """Phi^-1(p), the quantile of the standard normal distribution.

    >>> round(normal_quantile(0.975), 6)
    1.959964
    """
    return float(_sp.ndtri(p))


def chi2_sf(statistic: float, df: float) -> float:
    """1 - F_chi2(statistic; df), the upper tail of the chi-square distribution.

    >>> round(chi2_sf(3.841458820694124, 1), 6)
    0.05
    """
    return float(_sp.chdtrc(df, statistic))


__all__ = ["chi2_sf", "normal_quantile"]
