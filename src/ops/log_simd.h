/* src/ops/log_simd.h - log in double on vectors of four or eight lanes,
 * for src/ops/softmax_strided.c (the log of each row's sum, several rows at
 * once).  Internal to src/ops; macros only, as src/ops/exp_simd.h's (whose
 * vector types, FMA helpers and rules it takes: every width the same
 * operations per lane, so the same bits).
 *
 * x = 2^k z, z in [0.6875, 1.375) (the bits of x less those of 0.6875,
 * shifted: k their top 12, z's mantissa their low 52), and z falls in one
 * of 256 buckets by the top eight bits of that mantissa (widths 2^-9 below
 * 1 and 2^-8 above).  Bucket i holds invc = TG__LOG_INVC[i], near 1 / c for
 * its midpoint c, and logc = TG__LOG_LOGC[i], the double nearest
 * -log(invc), within 2^-10 of its ulp (scripts/make_log_table.py chose
 * invc so).  Then
 *   log x = k ln2 + logc + log1p(r),   r = z invc - 1,
 * r + rlo exact from p = z invc, plo = fma(z, invc, -p) (p - 1 exact by
 * Sterbenz, (p - 1) + plo by Fast2Sum).  |r| < 2^-9, but in the two
 * buckets next to 1, whose invc = 1 and logc = 0 (r = z - 1 exact, nothing
 * cancels against logc), where -2^-9 <= r < 2^-8.  log1p(r) = r + r^2 q,
 * q = -1/2 + r/3 - ... - r^6/8, Taylor's series to r^8 (the rest under
 * |r|^9 / 8 < 2^-67 |r|), by Estrin's scheme.  With ln2 = LN2_HI + LN2_LO,
 * LN2_HI of 42 bits (k LN2_HI exact, |k| < 2048): w = k LN2_HI + logc and
 * hi = w + r, each by Fast2Sum (|k LN2_HI| >= 0.69 > |logc| for k != 0;
 * |w| >= |r| where w != 0), so hi and the low parts hold k LN2_HI + logc +
 * r exactly, and y = hi + (r^2 q + (lo + (wlo + (k LN2_LO + rlo)))).
 *
 * Error, in ulps of y: its last rounding 0.5; logc's 2^-10 ulp of logc,
 * under 2^-9 (for k = 0, |y| > 2 |logc| / 3); r^2 q's three roundings
 * (under 1.5 2^-53 r^2), under 2^-60.4 |y| = 2^-7.4 ulp in the buckets next
 * to 1 (|y| > |r| / 1.01, |r| < 2^-8) and less elsewhere (|y| > 2^-9, r^2
 * < 2^-18); the series' rest 2^-14; the others (the low parts' sum, k
 * LN2_LO's rounding, ln2's remainder, r rlo) under 2^-20: under 0.51 ulp of
 * log x in all, for x positive, normal or subnormal (x < 2^-1022 is scaled
 * by 2^52 first), the bound tests/test_log_simd.c asserts against logl.
 * log 1 = +0, log +inf = +inf, log +-0 = -inf, log x = NaN for x < 0 (-inf
 * too), NaN for NaN. */
#ifndef TAPEGRAD_OPS_LOG_SIMD_H
#define TAPEGRAD_OPS_LOG_SIMD_H

#include "ops/exp_simd.h"

/* invc of each bucket (scripts/make_log_table.py). */
static const double TG__LOG_INVC[256] __attribute__((aligned(64), unused)) = {
    0x1.73d5e0c76fee9p+0, 0x1.72c8998700458p+0, 0x1.71bcd732fe772p+0, 0x1.70b29680effa4p+0,
    0x1.6fa9d43258984p+0, 0x1.6ea28d0fd5d73p+0, 0x1.6d9cbdf020c24p+0, 0x1.6c9863b1c7635p+0,
    0x1.6b957b372f66ap+0, 0x1.6a94016b5a066p+0, 0x1.6993f348ad1bep+0, 0x1.68954dd44bb56p+0,
    0x1.67980e09e6a0dp+0, 0x1.669c3104fad5ap+0, 0x1.65a1b3dd07f20p+0, 0x1.64a893ac77080p+0,
    0x1.63b0cda23cdfbp+0, 0x1.62ba5ee9ac6d7p+0, 0x1.61c544c261991p+0, 0x1.60d17c61dac9ep+0,
    0x1.5fdf0317bf3a1p+0, 0x1.5eedd630a2c8dp+0, 0x1.5dfdf301b9eefp+0, 0x1.5d0f56ee8aa70p+0,
    0x1.5c21ff51f9b5ep+0, 0x1.5b35e99d5dc0fp+0, 0x1.5a4b1348d26e4p+0, 0x1.596179c2623c1p+0,
    0x1.58791a94e8c9dp+0, 0x1.5791f340a2a46p+0, 0x1.56ac0156a1a1ap+0, 0x1.55c7426b76bcfp+0,
    0x1.54e3b416c1aa2p+0, 0x1.540153feea803p+0, 0x1.53201fcaf6655p+0, 0x1.5240152404df5p+0,
    0x1.516131bf11a07p+0, 0x1.5083735907a40p+0, 0x1.4fa6d7ac5ef9cp+0, 0x1.4ecb5c85da7b9p+0,
    0x1.4df0ffabf9f78p+0, 0x1.4d17bef357d3cp+0, 0x1.4c3f982e164e8p+0, 0x1.4b68893a3a034p+0,
    0x1.4a928ffad5632p+0, 0x1.49bdaa5838980p+0, 0x1.48e9d63d1fb81p+0, 0x1.4817119f39c09p+0,
    0x1.47455a6fb455ap+0, 0x1.4674aeb1f0382p+0, 0x1.45a50c6706d65p+0, 0x1.44d6719358448p+0,
    0x1.4408dc3fc96a0p+0, 0x1.433c4a7d06c96p+0, 0x1.4270ba69332b2p+0, 0x1.41a62a143397bp+0,
    0x1.40dc97aa90876p+0, 0x1.401401411b95cp+0, 0x1.3f4c65083744fp+0, 0x1.3e85c12c8bf9cp+0,
    0x1.3dc013dc028f6p+0, 0x1.3cfb5b53ee967p+0, 0x1.3c3795c6ee65ep+0, 0x1.3b74c17818429p+0,
    0x1.3ab2dca86db6ep+0, 0x1.39f1e5a36a62cp+0, 0x1.3931dab255071p+0, 0x1.3872ba222cc6fp+0,
    0x1.37b48248735e1p+0, 0x1.36f7317f1995bp+0, 0x1.363ac62288683p+0, 0x1.357f3e907fc60p+0,
    0x1.34c4992c4958fp+0, 0x1.340ad46178b48p+0, 0x1.3351ee967e330p+0, 0x1.3299e63f5da46p+0,
    0x1.31e2b9cd3a794p+0, 0x1.312c67b611a86p+0, 0x1.3076ee72a66e0p+0, 0x1.2fc24c886385dp+0,
    0x1.2f0e8073f9902p+0, 0x1.2e5b88b8c5fabp+0, 0x1.2da963dfe5313p+0, 0x1.2cf81072bc2dep+0,
    0x1.2c478d0bcaa15p+0, 0x1.2b97d8389c3bbp+0, 0x1.2ae8f08776961p+0, 0x1.2a3ad49ae9f04p+0,
    0x1.298d830fb8278p+0, 0x1.28e0fa7dd177cp+0, 0x1.2835398e1facbp+0, 0x1.278a3ee90d90ap+0,
    0x1.26e009355e3c8p+0, 0x1.2636972114665p+0, 0x1.258de75899f1bp+0, 0x1.24e5f88eea0c0p+0,
    0x1.243ec97d4c0edp+0, 0x1.239858da840edp+0, 0x1.22f2a55acba63p+0, 0x1.224dadc8657e3p+0,
    0x1.21a970dbcc603p+0, 0x1.2105ed61f7f4bp+0, 0x1.2063221161cbap+0, 0x1.1fc10dc7f845bp+0,
    0x1.1f1faf3d1d4d2p+0, 0x1.1e7f054e21da8p+0, 0x1.1ddf0ecdf410cp+0, 0x1.1d3fca8406566p+0,
    0x1.1ca137521e935p+0, 0x1.1c035408602c6p+0, 0x1.1b661f8a2e148p+0, 0x1.1ac998b75f9edp+0,
    0x1.1a2dbe6d06568p+0, 0x1.19928f8939d02p+0, 0x1.18f80af9b0c59p+0, 0x1.185e2fa65e643p+0,
    0x1.17c4fc7595a6fp+0, 0x1.172c70546ec19p+0, 0x1.16948a34a03cfp+0, 0x1.15fd490891d97p+0,
    0x1.1566abbd7518ap+0, 0x1.14d0b157e9170p+0, 0x1.143b58be9bfccp+0, 0x1.13a6a0f9cb5f9p+0,
    0x1.131288fe05d7bp+0, 0x1.127f0fd1ff435p+0, 0x1.11ec3470c59e2p+0, 0x1.1159f5db294f5p+0,
    0x1.10c8531d08864p+0, 0x1.10374b38abfefp+0, 0x1.0fa6dd3c9ff78p+0, 0x1.0f17083279948p+0,
    0x1.0e87cb26d0831p+0, 0x1.0df9252b4baa9p+0, 0x1.0d6b15525a2dcp+0, 0x1.0cdd9aa8d9133p+0,
    0x1.0c50b4488a381p+0, 0x1.0bc461457a3f4p+0, 0x1.0b38a0bdaa35cp+0, 0x1.0aad71cbce20dp+0,
    0x1.0a22d3903e70dp+0, 0x1.0998c51d0415dp+0, 0x1.090f45a3f955bp+0, 0x1.08865438ad771p+0,
    0x1.07fdf003144d5p+0, 0x1.0776182e302d5p+0, 0x1.06eecbdf468c3p+0, 0x1.06680a3d96defp+0,
    0x1.05e1d277f4aefp+0, 0x1.055c23bcef99fp+0, 0x1.04d6fd3471193p+0, 0x1.04525e11c36e9p+0,
    0x1.03ce4587500c3p+0, 0x1.034ab2c7be9b8p+0, 0x1.02c7a50747440p+0, 0x1.02451b7bbe8ccp+0,
    0x1.01c31567dfc7ap+0, 0x1.014191f768c2fp+0, 0x1.00c0906ee38aap+0, 0x1.0000000000000p+0,
    0x1.0000000000000p+0, 0x1.fd0479469af79p-1, 0x1.fb0c610a9c988p-1, 0x1.f9182b6d88431p-1,
    0x1.f727cce1805e5p-1, 0x1.f53b3a3ad5a8ep-1, 0x1.f35268576f4c9p-1, 0x1.f16d4c3f0f0f1p-1,
    0x1.ef8bdb3abc01fp-1, 0x1.edae0a9607b6cp-1, 0x1.ebd3cffd72310p-1, 0x1.e9fd210226ff8p-1,
    0x1.e829f39f20c65p-1, 0x1.e65a3dc05ec0dp-1, 0x1.e48df59a4f062p-1, 0x1.e2c511764c9c8p-1,
    0x1.e0ff87becc187p-1, 0x1.df3d4f16bfe21p-1, 0x1.dd7e5e330eb04p-1, 0x1.dbc2abea6af9fp-1,
    0x1.da0a2f33d120ep-1, 0x1.d854df3e94fccp-1, 0x1.d6a2b340a1524p-1, 0x1.d4f3a296862ebp-1,
    0x1.d347a4bc01b61p-1, 0x1.d19eb1585f5ffp-1, 0x1.cff8c01b8db4dp-1, 0x1.ce55c8e954feap-1,
    0x1.ccb5c3ba05f62p-1, 0x1.cb18a89152286p-1, 0x1.c97e6fadbfaa4p-1, 0x1.c7e71161b5a61p-1,
    0x1.c65285f8d5d9ep-1, 0x1.c4c0c6122f87cp-1, 0x1.c331ca3af2abdp-1, 0x1.c1a58b2ecaa60p-1,
    0x1.c01c01c011651p-1, 0x1.be9526d409d00p-1, 0x1.bd10f369479b3p-1, 0x1.bb8f609c1c27ep-1,
    0x1.ba10679951604p-1, 0x1.b89401bcbc57cp-1, 0x1.b71a28520540cp-1, 0x1.b5a2d4d5b1261p-1,
    0x1.b42e00d5fa096p-1, 0x1.b2bba602f4a4cp-1, 0x1.b14bbdf990d1ep-1, 0x1.afde42a3554c5p-1,
    0x1.ae732dd1c5fd8p-1, 0x1.ad0a79817966ap-1, 0x1.aba41fc101e12p-1, 0x1.aa401aa6e5e13p-1,
    0x1.a8de6466ea028p-1, 0x1.a77ef74d06342p-1, 0x1.a621cdb0eeca0p-1, 0x1.a4c6e202dca95p-1,
    0x1.a36e2eb5288cep-1, 0x1.a217ae5756c33p-1, 0x1.a0c35b8f1ed47p-1, 0x1.9f71311919415p-1,
    0x1.9e2129a45ae4ep-1, 0x1.9cd3401b0f857p-1, 0x1.9b876f563b60ep-1, 0x1.9a3db245a2dacp-1,
    0x1.98f603fb72d21p-1, 0x1.97b05f8d5d5ccp-1, 0x1.966cc01961a32p-1, 0x1.952b20d532597p-1,
    0x1.93eb7d0cdb836p-1, 0x1.92add008a3e22p-1, 0x1.9172152f15c21p-1, 0x1.903847ec46d6fp-1,
    0x1.8f0063beaf0cep-1, 0x1.8dca6439708efp-1, 0x1.8c9644ed3b28bp-1, 0x1.8b6401887c238p-1,
    0x1.8a3395c010f03p-1, 0x1.8904fd52f2476p-1, 0x1.87d8340aadeb5p-1, 0x1.86ad35c8d2689p-1,
    0x1.8583fe7a7603dp-1, 0x1.845c8a0a4e085p-1, 0x1.8336d48250bb9p-1, 0x1.8212d9ebb0d32p-1,
    0x1.80f0965e00000p-1, 0x1.7fd005fce4bb7p-1, 0x1.7eb124ff9ed50p-1, 0x1.7d93ef9cccab7p-1,
    0x1.7c786218747b6p-1, 0x1.7b5e78c8eae20p-1, 0x1.7a46300379b85p-1, 0x1.792f8439d01d7p-1,
    0x1.781a71dbeda2bp-1, 0x1.7706f56110f04p-1, 0x1.75f50b521aa8cp-1, 0x1.74e4b0401a4f6p-1,
};
/* -log(invc) of each bucket, the double nearest (the same script). */
static const double TG__LOG_LOGC[256] __attribute__((aligned(64), unused)) = {
    -0x1.7e3b8a4ee7405p-2, -0x1.7b54ec104d646p-2, -0x1.787066e083d5ep-2, -0x1.758df7b2aff2cp-2,
    -0x1.72ad9b8791861p-2, -0x1.6fcf4f603d8fdp-2, -0x1.6cf31051f2cedp-2, -0x1.6a18db74f48c4p-2,
    -0x1.6740add98a695p-2, -0x1.646a84958a6a2p-2, -0x1.61965cd7d501ep-2, -0x1.5ec433dba65afp-2,
    -0x1.5bf406af759b1p-2, -0x1.5925d2aa4ae59p-2, -0x1.5659950674d4bp-2, -0x1.538f4af520efdp-2,
    -0x1.50c6f1d12cd7cp-2, -0x1.4e0086da186c9p-2, -0x1.4b3c07790c69bp-2, -0x1.487970e95a76fp-2,
    -0x1.45b8c0a199713p-2, -0x1.42f9f3ff4d641p-2, -0x1.403d0868f779dp-2, -0x1.3d81fb5f0f9b9p-2,
    -0x1.3ac8ca390545ep-2, -0x1.38117280804b2p-2, -0x1.355bf1c3d908bp-2, -0x1.32a84564634a9p-2,
    -0x1.2ff66b09929d3p-2, -0x1.2d46602c818edp-2, -0x1.2a98226984dbfp-2, -0x1.27ebaf58d189ep-2,
    -0x1.2541048d412c8p-2, -0x1.22981fb7b3d7cp-2, -0x1.1ff0fe7cce7a6p-2, -0x1.1d4b9e7976e46p-2,
    -0x1.1aa7fd6079b3ep-2, -0x1.180618ef02ee0p-2, -0x1.1565eecd33bc2p-2, -0x1.12c77ccd6e53ap-2,
    -0x1.102ac0a1b641bp-2, -0x1.0d8fb81a021eep-2, -0x1.0af660f1a8e78p-2, -0x1.085eb8fb97b98p-2,
    -0x1.05c8be0d9535bp-2, -0x1.03346e00fdc63p-2, -0x1.00a1c6aa26074p-2, -0x1.fc218be60b25ep-3,
    -0x1.f702d3567e5edp-3, -0x1.f1e75f9e42be0p-3, -0x1.eccf2c8fda207p-3, -0x1.e7ba35fa6e628p-3,
    -0x1.e2a877b1d9c11p-3, -0x1.dd99eda3967e7p-3, -0x1.d88e93fb5e44fp-3, -0x1.d3866673bfc62p-3,
    -0x1.ce816166a0189p-3, -0x1.c97f80806acefp-3, -0x1.c480c0070f4d4p-3, -0x1.bf851c12e155cp-3,
    -0x1.ba8c90ae5351bp-3, -0x1.b5971a31824dap-3, -0x1.b0a4b49a25b43p-3, -0x1.abb55c3b16bafp-3,
    -0x1.a6c90d44d1050p-3, -0x1.a1dfc417237f4p-3, -0x1.9cf97cef00ec6p-3, -0x1.9816340d1c275p-3,
    -0x1.9335e5d59a989p-3, -0x1.8e588eb5d55bcp-3, -0x1.897e2b17aa1a2p-3, -0x1.84a6b75a22932p-3,
    -0x1.7fd22fed5854dp-3, -0x1.7b0091651da8dp-3, -0x1.7631d8201aa84p-3, -0x1.716600c457854p-3,
    -0x1.6c9d07d2157c4p-3, -0x1.67d6e9d75ff70p-3, -0x1.6313a36269575p-3, -0x1.5e5331445071cp-3,
    -0x1.5995900191af1p-3, -0x1.54dabc399d5d2p-3, -0x1.5022b2a100a44p-3, -0x1.4b6d6fdc9eaa7p-3,
    -0x1.46baf0f461dbap-3, -0x1.420b32870bdd4p-3, -0x1.3d5e3126dea82p-3, -0x1.38b3e9dff9c76p-3,
    -0x1.340c598642c2cp-3, -0x1.2f677cbbb3a97p-3, -0x1.2ac550869cc59p-3, -0x1.2625d1d9d9f5ap-3,
    -0x1.2188fd8cafa66p-3, -0x1.1ceed09897755p-3, -0x1.185747dc0ef36p-3, -0x1.13c26053820c1p-3,
    -0x1.0f301717de0f8p-3, -0x1.0aa0692122dd6p-3, -0x1.06135345f2315p-3, -0x1.0188d2e8b2143p-3,
    -0x1.fa01c9bf6dce4p-4, -0x1.f0f70d05ff2dep-4, -0x1.e7f168f913d40p-4, -0x1.def0d8fed8db8p-4,
    -0x1.d5f5563cf70e6p-4, -0x1.ccfedbd7ed3a6p-4, -0x1.c40d644492cb1p-4, -0x1.bb20e936a1979p-4,
    -0x1.b23965beefeffp-4, -0x1.a956d3d578e63p-4, -0x1.a0792e6b99cb1p-4, -0x1.97a07024d8e79p-4,
    -0x1.8ecc93617b6e2p-4, -0x1.85fd92753ba41p-4, -0x1.7d33687c2e3cap-4, -0x1.746e1024b1ed4p-4,
    -0x1.6bad83eb0b3b7p-4, -0x1.62f1be9440742p-4, -0x1.5a3abb0f71e25p-4, -0x1.5188743ca6307p-4,
    -0x1.48dae495a6012p-4, -0x1.403207d4e1b84p-4, -0x1.378dd7e1aa711p-4, -0x1.2eee507b0a301p-4,
    -0x1.26536c241b365p-4, -0x1.1dbd26555e912p-4, -0x1.152b79c1fecd0p-4, -0x1.0c9e615ac3e1ep-4,
    -0x1.0415d89e68442p-4, -0x1.f723b4c974523p-5, -0x1.e624c44cede16p-5, -0x1.d52ed5f5a7867p-5,
    -0x1.c441e01eccaaap-5, -0x1.b35dd98f4baa5p-5, -0x1.a282b8f93c162p-5, -0x1.91b074386d31ep-5,
    -0x1.80e7028448cbfp-5, -0x1.70265a3aa2768p-5, -0x1.5f6e72bdf8fb4p-5, -0x1.4ebf42e14226ep-5,
    -0x1.3e18c1fa0ce9ap-5, -0x1.2d7ae57abbbbap-5, -0x1.1ce5a67f9553ep-5, -0x1.0c58fa551ba9dp-5,
    -0x1.f7a9b1269e839p-6, -0x1.d6b27211cd820p-6, -0x1.b5cc25544d8ddp-6, -0x1.94f6b8ffa0470p-6,
    -0x1.74321cadbc6dbp-6, -0x1.537e3f99df584p-6, -0x1.32db0f0f32e03p-6, -0x1.12487ad303f58p-6,
    -0x1.e38ce44d8311ep-7, -0x1.a2a9c81c28497p-7, -0x1.61e77f44f3feep-7, -0x1.2145e82dff203p-7,
    -0x1.c189ce1ae2825p-8, -0x1.40c8a83b078a7p-8, -0x1.80904d49584c1p-9, 0x0.0p+0,
    0x0.0p+0, 0x1.7ee1207b12e79p-8, 0x1.3e729684927e4p-7, 0x1.bcf711655b861p-7,
    0x1.1d7f7f4b0abf6p-6, 0x1.5c45a5b865387p-6, 0x1.9ace759cd8511p-6, 0x1.d91a676843cc2p-6,
    0x1.0b94f79ea2176p-5, 0x1.2a7ec277be86bp-5, 0x1.494acbdf6311ap-5, 0x1.67f94f2d4fd9ep-5,
    0x1.868a82c1e16d0p-5, 0x1.a4fe9fda0123ap-5, 0x1.c355dcd059f34p-5, 0x1.e19070731201cp-5,
    0x1.ffae913035300p-5, 0x1.0ed839bee26fcp-4, 0x1.1dcb262fb7946p-4, 0x1.2cb028292ce22p-4,
    0x1.3b8759af606edp-4, 0x1.4a50d3b767043p-4, 0x1.590cafd085c2bp-4, 0x1.67bb070c300ffp-4,
    0x1.765bf23a6ce15p-4, 0x1.84ef89791b82bp-4, 0x1.9375e56256edap-4, 0x1.a1ef1d8d34cd7p-4,
    0x1.b05b499d073fbp-4, 0x1.beba8190bd761p-4, 0x1.cd0cdc19293ddp-4, 0x1.db526feea1928p-4,
    0x1.e98b54bf09463p-4, 0x1.f7b79fffb1dddp-4, 0x1.02ebb43c6254dp-3, 0x1.09f561ff529c2p-3,
    0x1.10f8e422841b3p-3, 0x1.17f6457f65613p-3, 0x1.1eed90d068ac1p-3, 0x1.25ded09afcad0p-3,
    0x1.2cca0f6b14252p-3, 0x1.33af57441d651p-3, 0x1.3a8eb2c48db76p-3, 0x1.41682bf724bbep-3,
    0x1.483bcce1be3ddp-3, 0x1.4f099f38368b0p-3, 0x1.55d1ad549c56fp-3, 0x1.5c94007308abbp-3,
    0x1.6350a28a9a756p-3, 0x1.6a079d0f712d4p-3, 0x1.70b8f967c7a73p-3, 0x1.7764c11b0d928p-3,
    0x1.7e0afd6af8273p-3, 0x1.84abb769e9138p-3, 0x1.8b46f835cfa5bp-3, 0x1.91dcc8b952bddp-3,
    0x1.986d3217880ccp-3, 0x1.9ef83d2796a32p-3, 0x1.a57df294f75cep-3, 0x1.abfe5adaa6a4cp-3,
    0x1.b2797ef599a0ep-3, 0x1.b8ef66fde1c3bp-3, 0x1.bf601b9dc0ce0p-3, 0x1.c5cba54c0b424p-3,
    0x1.cc320c1041503p-3, 0x1.d293581b483e8p-3, 0x1.d8ef91af4bd5ep-3, 0x1.df46c0d17e52ep-3,
    0x1.e598ed4f56e2dp-3, 0x1.ebe61f41e630ap-3, 0x1.f22e5e60bc05dp-3, 0x1.f871b27e42847p-3,
    0x1.feb02345a1fcbp-3, 0x1.0274dc16e5730p-2, 0x1.058f3c77b4fc5p-2, 0x1.08a7366f4bfb0p-2,
    0x1.0bbccdb0e64bep-2, 0x1.0ed005ef3a9a5p-2, 0x1.11e0e2daf14b8p-2, 0x1.14ef67ff27059p-2,
    0x1.17fb98e16055dp-2, 0x1.1b057925dbf4ap-2, 0x1.1e0d0c36d1ebep-2, 0x1.211255983f60cp-2,
    0x1.241558bfc3404p-2, 0x1.2716191a4213cp-2, 0x1.2a1499f766bcap-2, 0x1.2d10debf3f182p-2,
    0x1.300aeacc91d0bp-2, 0x1.3302c15f34588p-2, 0x1.35f865cfca13fp-2, 0x1.38ebdb3ff9322p-2,
    0x1.3bdd24eb4ab6bp-2, 0x1.3ecc460eecb50p-2, 0x1.41b941cd0dbedp-2, 0x1.44a41b463407cp-2,
};

/* ln2 = TG__LOG_LN2_HI + TG__LOG_LN2_LO: the high part 42 bits, so that k
 * times it is exact for |k| < 2^11, the low part the double nearest the
 * rest. */
#define TG__LOG_LN2_HI 0x1.62e42fefa3800p-1
#define TG__LOG_LN2_LO 0x1.ef35793c76730p-45

/* A table lookup of 256 entries at AVX-512 (TG__TAB8 takes 32): a gather.
 * The other widths' TG__TAB4 and TG__TAB4X take any table. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TG__GATHER8(tab, j) ((tg__v8d)_mm512_i64gather_pd((__m512i)(j), (tab), 8))
#else   /* never taken (tg__exp_width_get), but compiled */
#define TG__GATHER8(tab, j) TG__TAB_LANES(tg__v8d, tg__v8u, 8, tab, j)
#endif

/* y = log(x_in) in each lane of VD (VU: its uint64 lanes); FMA and GATHER
 * the width's helpers (TG__FMA4 / TG__TAB4, TG__FMA4X / TG__TAB4X, TG__FMA8
 * / TG__GATHER8). */
#define TG__LOGV(VD, VU, FMA, GATHER, x_in, y)                                            \
    do {                                                                                  \
        const VD lz_ = {0}, lx_ = (x_in);                                                 \
        const VU lsub_ = (VU)(lx_ < 0x1p-1022);   /* subnormal (or <= 0): times 2^52 */   \
        const VU lu_ = ((VU)(lx_ * 0x1p52) & lsub_) | ((VU)lx_ & ~lsub_);                 \
        /* the bits less 0.6875's, plus 2^63: k + 2048 in the top 12 */                   \
        const VU lt_ = lu_ + (0x8000000000000000u - 0x3FE6000000000000u);                 \
        const VD lk_ = ((VD)((lt_ >> 52) | 0x4330000000000000u) - (0x1p52 + 2048.0)) -    \
                       (VD)(lsub_ & (VU)(lz_ + 52.0));                                    \
        const VU li_ = (lt_ >> 44) & 255;                                                 \
        const VD lzv_ = (VD)((lt_ & 0x000FFFFFFFFFFFFFu) + 0x3FE6000000000000u);          \
        const VD linv_ = GATHER(TG__LOG_INVC, li_), llc_ = GATHER(TG__LOG_LOGC, li_);     \
        const VD lp_ = lzv_ * linv_, lplo_ = FMA(lzv_, linv_, -lp_);                      \
        const VD lpm1_ = lp_ - 1.0, lr_ = lpm1_ + lplo_, lrlo_ = (lpm1_ - lr_) + lplo_;   \
        const VD lr2_ = lr_ * lr_;                                                        \
        const VD la_ = FMA(lr_, lz_ - 0.25, lz_ + 1.0 / 3.0);                             \
        const VD lb_ = FMA(lr_, lz_ - 1.0 / 6.0, lz_ + 0.2);                              \
        const VD lc_ = FMA(lr_, lz_ - 0.125, lz_ + 1.0 / 7.0);                            \
        const VD lbc_ = FMA(lr2_, lc_, lb_);                                              \
        const VD lpq_ = FMA(lr2_, lbc_, la_);                                             \
        const VD lq_ = FMA(lr_, lpq_, lz_ - 0.5);                                         \
        const VD lkh_ = lk_ * TG__LOG_LN2_HI;   /* exact */                               \
        const VD lw_ = lkh_ + llc_, lwlo_ = (lkh_ - lw_) + llc_;                          \
        const VD lhi_ = lw_ + lr_, llo_ = (lw_ - lhi_) + lr_;                             \
        const VD lkl_ = FMA(lk_, lz_ + TG__LOG_LN2_LO, lrlo_);                            \
        const VD ly_ = lhi_ + (lr2_ * lq_ + (llo_ + (lwlo_ + lkl_)));                     \
        /* x not positive and finite: +inf, -inf for +-0, NaN for x < 0 or NaN */         \
        const VU lok_ = (VU)(lx_ > 0.0) & (VU)(lx_ < __builtin_inf());                    \
        const VU lneg_ = (VU)(lx_ < 0.0), lzero_ = (VU)(lx_ == 0.0);                      \
        const VU lsp_ = ((VU)(lz_ + __builtin_nan("")) & lneg_) |                         \
                        ((VU)(lz_ - __builtin_inf()) & lzero_) |                          \
                        ((VU)(lx_ + lx_) & ~(lneg_ | lzero_));                            \
        (y) = (VD)(((VU)ly_ & lok_) | (lsp_ & ~lok_));                                    \
    } while (0)

#endif
