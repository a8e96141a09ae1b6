"""cupyx.errstate / seterr / geterr as CuPy has them (cupyx/_ufunc_config.py): a thread-local
state whose only supported entry is ``linalg`` ('ignore', the default, or 'raise'); the others
raise NotImplementedError when set.  With ``linalg='raise'`` the stand-in's cupy.linalg raises
``numpy.linalg.LinAlgError`` on a nonzero cuSOLVER devInfo, as CuPy does."""
import contextlib
import threading

_config = threading.local()


def _get(name, default=None):
    try:
        return getattr(_config, name)
    except AttributeError:
        setattr(_config, name, default)
        return default


def get_config_divide():
    return _get("divide")


def get_config_over():
    return _get("over")


def get_config_under():
    return _get("under")


def get_config_invalid():
    return _get("invalid")


def get_config_linalg():
    return _get("linalg", "ignore")


@contextlib.contextmanager
def errstate(*, divide=None, over=None, under=None, invalid=None, linalg=None):
    old = seterr(divide=divide, over=over, under=under, invalid=invalid, linalg=linalg)
    try:
        yield
    finally:
        seterr(**old)


def seterr(*, divide=None, over=None, under=None, invalid=None, linalg=None):
    old = geterr()
    for value in (divide, over, under, invalid):
        if value is not None:
            raise NotImplementedError()
    if linalg is not None:
        if linalg not in ("ignore", "raise"):
            raise NotImplementedError()
        _config.linalg = linalg
    _config.divide = _config.over = _config.under = _config.invalid = None
    return old


def geterr():
    return dict(divide=get_config_divide(), over=get_config_over(), under=get_config_under(),
                invalid=get_config_invalid(), linalg=get_config_linalg())
